"""Routes of the job view pages."""

from django.urls import path

from brokerui.console.jobviews import views

urlpatterns = [
    path("views/", views.view_list, name="views"),
    path("views/<str:job>/<str:view>/", views.view_detail, name="view"),
]
