from django.urls import path

from brokerui.console.messages import views

urlpatterns = [
    path("topics/<str:topic>/messages/", views.browse_messages, name="messages"),
    path("topics/<str:topic>/messages/tail/", views.tail_messages, name="messages_tail"),
    path(
        "topics/<str:topic>/messages/<int:partition>/<int:offset>/",
        views.record_detail,
        name="message",
    ),
    path("topics/<str:topic>/produce/", views.produce, name="produce"),
    path("topics/<str:topic>/export/", views.export_messages, name="messages_export"),
    path("topics/<str:topic>/import/", views.import_messages, name="messages_import"),
]
