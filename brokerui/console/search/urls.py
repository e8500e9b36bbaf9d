from django.urls import path

from brokerui.console.search import views

urlpatterns = [
    path("searches/", views.search_list, name="searches"),
    path("searches/validate/", views.search_validate, name="search_validate"),
    path("searches/<str:qid>/", views.search_detail, name="search"),
    path("searches/<str:qid>/delete/", views.search_delete, name="search_delete"),
]
