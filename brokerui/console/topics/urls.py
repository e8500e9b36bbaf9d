"""Topic routes. Creation lives at /new-topic/ so that no topic name ("new" is a valid one) can
shadow it; everything about one topic lives under /topics/<name>/."""

from django.urls import path

from brokerui.console.schemas import views as schema_views
from brokerui.console.topics import views

urlpatterns = [
    path("topics/", views.topic_list, name="topics"),
    path("new-topic/", views.topic_create, name="topic_create"),
    path("topics/<str:name>/", views.topic_detail, name="topic"),
    path("topics/<str:name>/config/", views.topic_config, name="topic_config"),
    path("topics/<str:name>/partitions/", views.topic_partitions, name="topic_partitions"),
    path("topics/<str:name>/purge/", views.topic_purge, name="topic_purge"),
    path("topics/<str:name>/delete/", views.topic_delete, name="topic_delete"),
    path(
        "topics/<str:name>/schema-mapping/",
        schema_views.topic_schema_mapping,
        name="topic_schema_mapping",
    ),
    path(
        "topics/<str:name>/schema-mapping/<str:part>/remove/",
        schema_views.topic_schema_unmap,
        name="topic_schema_unmap",
    ),
]
