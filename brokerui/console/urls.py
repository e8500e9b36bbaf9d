from django.urls import path

from brokerui.console import views

app_name = "console"

urlpatterns = [
    path("", views.home, name="home"),
]
