"""Browser-test fixtures, defined in tests/support/browser.py (shared by every browser test module)."""

from tests.support.browser import browser, page, served

__all__ = ["browser", "page", "served"]
