"""System checks of runs' own configuration. The ids stay those they were first published under
(governance.E010, governance.E011), so a deployment that silences or greps for them keeps working."""

from django.conf import settings
from django.core import checks

from runs import signing
from runs.witness import witness_host_allowed


@checks.register(checks.Tags.security)
def receipts_can_be_signed(app_configs, **kwargs):
    """Without a signing key no run can be sealed: refuse to start rather than fail every run's end."""
    try:
        signing.signing_key()
    except Exception as exc:  # the key's own error says what is wrong with it
        return [checks.Error(str(exc), hint=signing.missing_key_message(), id="governance.E010")]
    if settings.WARRANT_WITNESS_URL:
        if not witness_host_allowed(settings.WARRANT_WITNESS_URL):
            return [checks.Error("WARRANT_WITNESS_URL's host is not in WARRANT_WITNESS_ALLOWED_HOSTS",
                                 hint="List the witness's host there: checkpoints are only sent where the platform "
                                      "engineer allowed.", id="governance.E011")]
    return []
