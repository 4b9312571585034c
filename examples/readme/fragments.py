#!/usr/bin/env python3
"""The Python README's fragments (bindings/python/README.md), each word for
word inside a complete program. `make test` runs it, and checks that every
block marked "fragment of examples/readme/fragments.py" is here line for
line (Tests/docs/run_blocks.py).

The host around the fragments: a phone number, an SMS gateway that prints
what it would send, and for each fragment a fresh engine on a manual clock
with host-thread delivery.

    TICKGATE_LIBRARY=build/libtickgate.so PYTHONPATH=bindings/python python3 examples/readme/fragments.py
"""

import tickgate


class sms_gateway:
    @staticmethod
    def send_code(to: str) -> None:
        print("sms to", to)


def resend_flow(engine: tickgate.Engine, phone: str) -> None:
    """"The resend flow drives the same button from send tickets"."""
    with engine.send_begin("login", phone):   # TG_E_COOLING_DOWN/IN_FLIGHT/LOCKED raise
        sms_gateway.send_code(phone)          # an exception here ends the ticket as failed
    print(engine.button("login", phone).title)   # "Resend (60s)"


def budgets(engine: tickgate.Engine, phone: str) -> None:
    """"A backend charges each send to budgets across keys"."""
    engine.set_budget("ip", [(10, 3600), (50, 86400)])            # 10 per hour, 50 per day
    try:
        with engine.send_begin("login", phone, budgets=[("ip", "203.0.113.7")]):
            sms_gateway.send_code(phone)
    except tickgate.Locked as refused:                            # .budget is None for the key's own cap
        print(refused.budget, refused.budget_key, refused.display_seconds)
    left = engine.verify_failed("login", phone)                   # 4: the 5th wrong code kills the code
    print(engine.budget_usage("ip", "203.0.113.7"))              # BudgetUsage(used=1, max_sends=10, ...)


for fragment in (resend_flow, budgets):
    with tickgate.Engine(clock="manual", delivery="host") as engine:
        fragment(engine, "+8613800000000")
