from django.urls import path

from brokerui.console.dualwrite import views

urlpatterns = [
    path("dual-writes/", views.dualwrite_page, name="dualwrite"),
    path("dual-writes/<str:run_id>/", views.dualwrite_run, name="dualwrite_run"),
]
