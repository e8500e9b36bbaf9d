from django.urls import path

from brokerui.console.capture import views

urlpatterns = [
    path("capture/", views.capture_list, name="capture"),
    path("capture/start/", views.capture_start, name="capture_start"),
    path("capture/<str:name>/snapshot/", views.capture_snapshot, name="capture_snapshot"),
    path("capture/<str:name>/stop/", views.capture_stop, name="capture_stop"),
]
