"""The web console's static files: package data, served by adapter/http/console.py."""
