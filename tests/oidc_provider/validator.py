from oauth2_provider.oauth2_validators import OAuth2Validator


class Validator(OAuth2Validator):
    oidc_claim_scope = None  # every claim, whatever the scopes

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }
