"""Sessions kept under a digest of their key, as API tokens are.

Django's database sessions store the cookie's value as the row's key, so whoever reads
django_session (a DBA, a backup, a replica) can send it back as a cookie and act, and approve,
as anyone signed in. Here the row holds a digest of the key: the cookie opens the row, the row
does not give the cookie, and its data, signed for that key alone, opens no other row.
"""

import hashlib

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.utils import timezone


def stored_key(session_key: str) -> str:
    # The model's key is 40 characters: 160 bits of SHA-256.
    return hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).hexdigest()[:40]


class SessionStore(DatabaseSessionStore):
    @property
    def key_salt(self):
        # The data is signed for its own key: a signed-in user's data copied into a row for a key
        # someone chose does not decode (the row's key is written before its data is encoded).
        return f"core.sessions.{self.session_key or ''}"

    def _get_session_from_db(self):
        if self.session_key is None:
            return None
        try:
            return self.model.objects.get(session_key=stored_key(self.session_key), expire_date__gt=timezone.now())
        except self.model.DoesNotExist:
            self._session_key = None

    async def _aget_session_from_db(self):
        if self.session_key is None:
            return None
        try:
            return await self.model.objects.aget(session_key=stored_key(self.session_key),
                                                 expire_date__gt=timezone.now())
        except self.model.DoesNotExist:
            self._session_key = None

    def exists(self, session_key):
        return super().exists(stored_key(session_key))

    async def aexists(self, session_key):
        return await super().aexists(stored_key(session_key))

    def create_model_instance(self, data):
        row = super().create_model_instance(data)
        row.session_key = stored_key(row.session_key)
        return row

    async def acreate_model_instance(self, data):
        row = await super().acreate_model_instance(data)
        row.session_key = stored_key(row.session_key)
        return row

    def delete(self, session_key=None):
        if session_key is None and self.session_key is None:
            return
        super().delete(stored_key(session_key if session_key is not None else self.session_key))

    async def adelete(self, session_key=None):
        if session_key is None and self.session_key is None:
            return
        await super().adelete(stored_key(session_key if session_key is not None else self.session_key))
