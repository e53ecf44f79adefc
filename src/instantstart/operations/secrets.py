"""What an operation may store: no secret is ever persisted, and what it records is scrubbed of its call's."""

from __future__ import annotations

import json
from typing import Any

from instantstart.errors import InternalError, InvalidInput
from instantstart.logs import carried_secrets, contains_secret, redact_secrets

# The Secret values each operation's call carried, by operation id (in memory only, bounded like the log
# registry): what that operation stores later (stage outputs, errors, its result) is scrubbed of them.
_OPERATION_SECRETS: dict[str, tuple[str, ...]] = {}
MAX_OPERATIONS_WITH_SECRETS = 1024


def refuse_secrets(what: str, value: Any) -> None:
    """Never persist a secret: a SecretStr object, a server secret, or a Secret field of the call recording
    `value` (an ordinary value of another call that happens to equal someone's secret is that call's data)."""
    text = json.dumps(value, default=lambda o: "\x00unserialisable", sort_keys=True)
    if "\x00unserialisable" in text or contains_secret(text):
        raise InternalError(
            f"Refused to store the operation's {what}: it carries a secret.",
            hint="A Secret field is used in memory only; keep it in a Kubernetes Secret and pass its name.",
        )
    fields = [name for name, secret in carried_secrets() if secret in text]
    if fields:
        raise InvalidInput(
            f"Invalid input: {', '.join(fields)}: the secret's value also appears in what this operation records "
            f"in the clear (a name, Region or id of the call), so it cannot be kept out of the database.",
            hint=f"Pass the real secret in {fields[0]}; a token never equals ordinary text of the call.",
            details={"fields": [{"field": f, "message": "equals text this operation records"} for f in fields]},
        )


def remember_operation_secrets(operation_id: str) -> None:
    """Tie the Secret values of the call in this context to the operation it recorded (see scrub_secrets)."""
    carried = tuple(secret for _name, secret in carried_secrets())
    if carried:
        _OPERATION_SECRETS[operation_id] = carried
        while len(_OPERATION_SECRETS) > MAX_OPERATIONS_WITH_SECRETS:
            del _OPERATION_SECRETS[next(iter(_OPERATION_SECRETS))]


def scrub_secrets(value: Any, operation_id: str | None = None) -> Any:
    """`value` with every server secret and every secret of `operation_id`'s call replaced by *** (stage outputs
    and errors are never refused: a stage that echoes a secret in a message must not wedge its operation)."""
    carried = _OPERATION_SECRETS.get(operation_id, ()) if operation_id else ()
    text = json.dumps(value, default=str)
    if not contains_secret(text, carried):
        return value
    return json.loads(redact_secrets(text, carried))
