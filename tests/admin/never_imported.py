"""A tool module outside WARRANT_PYTHON_TOOL_MODULES: nothing may import it to render a page
(tests/admin/test_approval_card_delivery.py checks that it stays unimported)."""


def send(args, ctx):
    return {"sent": True}


send.honours_idempotency_key = True
