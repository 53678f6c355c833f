"""A hook for the tests: prints the event it read on stdin as one JSON line, its name and what
it is about (a source, a reason, a notification's type, a trigger)."""

import json
import sys

event = json.load(sys.stdin)
about = next((event[k] for k in ("source", "reason", "notification_type", "trigger") if event.get(k)), "")
print(json.dumps([event["hook_event_name"], about]))
