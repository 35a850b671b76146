"""The governance side of the workbench. Importing each module registers its model admins.

core.admin first: it sets the JSON form field every model admin registered after it uses.
"""

import core.admin  # noqa: F401
from governance.admin import accounts, drafts, policies, roles  # noqa: F401
