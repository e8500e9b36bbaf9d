"""Account pages: the account page (role, API token), password change, and the password-reset
pages, which say how to get a new password instead of failing (Tidelog sends no mail)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import password_validation
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_GET, require_POST

from brokerui.accounts import services
from brokerui.audit.services import process_sink

NEW_TOKEN_SESSION_KEY = "accounts.new_token"  # the new key, shown once on the next page view


@require_GET
def account(request: HttpRequest) -> HttpResponse:
    new_key = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    context = {
        "nav": "account",
        "token": services.token_get(user=request.user),
        "new_key": new_key,
    }
    response = render(request, "accounts/account.html", context)
    response["Cache-Control"] = "no-store"  # the page may hold a token key
    return response


@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    request.session[NEW_TOKEN_SESSION_KEY] = services.token_create(
        user=request.user, sink=process_sink()
    )
    messages.success(request, "New API token created. Copy it now: it is shown only once.")
    return redirect("account")


@require_POST
def token_revoke(request: HttpRequest) -> HttpResponse:
    if services.token_revoke(user=request.user, sink=process_sink()):
        messages.success(request, "API token revoked: requests sending it now get 401.")
    else:
        messages.info(request, "You had no API token.")
    return redirect("account")


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "registration/password_change_form.html"
    success_url = reverse_lazy("account")
    extra_context = {"nav": "account"}

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            password_rules=password_validation.password_validators_help_texts(), **kwargs
        )

    def form_valid(self, form):
        response = super().form_valid(form)  # keeps this session logged in
        services.password_change_record(user=self.request.user, sink=process_sink())
        messages.success(
            self.request,
            "Password changed. Your other sessions are logged out; your API token still works.",
        )
        return response


@require_GET
def password_change_done(request: HttpRequest) -> HttpResponse:
    return redirect("account")


@login_not_required
def password_reset_unavailable(request: HttpRequest, **kwargs) -> HttpResponse:
    """Every step of Django's reset-by-email flow: Tidelog sends no mail, so say what to do."""
    return render(request, "registration/password_reset_unavailable.html", status=404)


def locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """django-axes' lockout response (settings.AXES_LOCKOUT_CALLABLE): a page saying why, for
    how long and how an administrator lifts it; 429 Too Many Requests."""
    context = {
        "username": (credentials or {}).get("username") or request.POST.get("username", ""),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff_minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response
