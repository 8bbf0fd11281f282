"""Browser tests: headless Chromium driven by Playwright against a real adapter."""
