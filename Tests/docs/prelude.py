# prelude.py — what the READMEs' Python fragments assume the host has, for
# Tests/docs/run_blocks.py: an engine, a phone number and an SMS gateway.
import tickgate

engine = tickgate.Engine(clock="manual", delivery="host")
phone = "+8613800000000"


class sms_gateway:
    @staticmethod
    def send_code(to: str) -> None:
        print("sms to", to)
