"""A hook for the tests: prints the event it read on stdin as one JSON line, its name and what
it is about (a source, a reason, a notification's type)."""

import json
import sys

event = json.load(sys.stdin)
about = event.get("source") or event.get("reason") or event.get("notification_type") or ""
print(json.dumps([event["hook_event_name"], about]))
