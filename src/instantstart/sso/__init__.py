"""Single sign-on with one OpenID Connect provider: configuration, token validation, the users it signs in."""
