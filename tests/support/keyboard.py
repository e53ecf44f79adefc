"""Keyboard-only checks for browser tests: every control that runs an operation is reached with Tab."""

from __future__ import annotations

from typing import Any


def tab_reaches_every_operation(page: Any) -> None:
    """Press Tab through the whole page: each visible, enabled control carrying data-operation gets the focus."""
    wanted = page.evaluate("""() => {
      const controls = 'button[data-operation], select[data-operation], input[data-operation]';
      const els = [...document.querySelectorAll(controls)]
        .filter((el) => el.checkVisibility() && !el.disabled);
      els.forEach((el, i) => { el.dataset.kb = String(i); });
      return els.map((el) => el.dataset.operation);
    }""")
    assert wanted, "no control to reach"
    stops = page.evaluate("() => document.querySelectorAll('a, button, input, select, textarea, [tabindex]').length")
    page.locator("body").focus()
    reached: set[int] = set()
    for _ in range(stops + 5):
        page.keyboard.press("Tab")
        index = page.evaluate("() => document.activeElement?.dataset?.kb ?? null")
        if index is not None:
            reached.add(int(index))
    missed = sorted({wanted[i] for i in range(len(wanted)) if i not in reached})
    assert not missed, f"not reachable with Tab: {missed}"
