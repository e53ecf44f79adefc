"""The web UI: a server-rendered shell, sign-in with the API token into a session cookie, static ES modules."""
