"""Who runs a management command: the name records carry when the platform acts on a person's command
in a shell (an emergency import, a golden recording, a token issued, an export)."""

import os
import pwd


def os_user() -> str:
    """The account of this process's real uid, as the system knows it. Not getpass.getuser(): it reads
    $LOGNAME and $USER first, which whoever runs the command sets as they like. Still only the
    shell's word: anyone with that account, or root, can run as it."""
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name[:100]
    except KeyError:  # a uid with no entry (a container's arbitrary user)
        return f"uid {uid}"
