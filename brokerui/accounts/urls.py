"""Account routes, at /accounts/ (Django's names: login, logout, password_change...)."""

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import path
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView

from brokerui.accounts import views
from brokerui.accounts.oidc import SignInRequestView

urlpatterns = [
    path("", views.account, name="account"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            extra_context={
                "login_failure_limit": settings.AXES_FAILURE_LIMIT,
                "login_cooloff_minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
                "sso_name": settings.TIDELOG_OIDC_NAME if settings.TIDELOG_OIDC_ISSUER else None,
            }
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", views.PasswordChangeView.as_view(), name="password_change"),
    path("password_change/done/", views.password_change_done, name="password_change_done"),
    path("tokens/create/", views.token_create, name="token_create"),
    path("tokens/revoke/", views.token_revoke, name="token_revoke"),
    # Password reset by email: off (Tidelog has no mail set up); each step explains instead.
    path("password_reset/", views.password_reset_unavailable, name="password_reset"),
    path("password_reset/done/", views.password_reset_unavailable, name="password_reset_done"),
    path(
        "reset/<uidb64>/<token>/",
        views.password_reset_unavailable,
        name="password_reset_confirm",
    ),
    path("reset/done/", views.password_reset_unavailable, name="password_reset_complete"),
]

if settings.TIDELOG_OIDC_ISSUER:  # single sign-on (brokerui.accounts.oidc)
    urlpatterns += [
        path(
            "oidc/authenticate/",
            login_not_required(SignInRequestView.as_view()),
            name="oidc_authentication_init",
        ),
        path(
            "oidc/callback/",
            login_not_required(OIDCAuthenticationCallbackView.as_view()),
            name="oidc_authentication_callback",
        ),
    ]
