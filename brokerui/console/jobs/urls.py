from django.urls import path

from brokerui.console.jobs import views

urlpatterns = [
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/<str:name>/start/", views.job_start, name="job_start"),
    path("jobs/<str:name>/stop/", views.job_stop, name="job_stop"),
]
