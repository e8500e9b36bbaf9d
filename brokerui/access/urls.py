"""Access routes, at /access/ (the same for every cluster: a binding names its cluster)."""

from django.urls import path

from brokerui.access import views

urlpatterns = [
    path("", views.access_page, name="access"),
    path("bindings/", views.binding_add, name="access_bind"),
    path("bindings/<int:pk>/remove/", views.binding_remove, name="access_unbind"),
    path("masking/", views.mask_add, name="access_mask"),
    path("masking/<int:pk>/remove/", views.mask_remove, name="access_mask_remove"),
]
