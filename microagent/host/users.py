"""Who may do what: the users, their roles, and who may approve whose request.

A user asks (starts sessions, writes in them, resumes them), approves (gives the
verdict on what the agent asks to do), or both. Nobody approves their own
request unless the host is started to allow it (`approve_own`). An approver sees
someone else's session only while it waits for their verdict, or once it holds
one they gave; to anyone else it is as missing as a session that never was.
"""

import hmac
import re

from microagent.host.request import Refused
from microagent.host.store import Session
from microagent.host.events import pending

ASKS, APPROVES = "asks", "approves"  # the two roles a user may have, in the users file
NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")  # as the audit trail and verdicts say it


def read_users(users: dict) -> dict[str, tuple[str, frozenset]]:
    """The users file's JSON as name -> (bearer token, roles); a ValueError says what
    is wrong.

    Each name maps to {"token": "...", "roles": ["asks"]} (or ["approves"], or both), or
    to a bare token, which may do both.
    """
    if not isinstance(users, dict) or not users:
        raise ValueError('the users are a JSON object: name -> {"token": ..., '
                         '"roles": [...]}')
    read = {}
    for name, user in users.items():
        if isinstance(user, str):  # a bare token may do both
            user = {"token": user, "roles": [ASKS, APPROVES]}
        given = user if isinstance(user, dict) else {}
        token, roles = given.get("token"), given.get("roles")
        if not NAME.fullmatch(name):
            raise ValueError(f"{name!r}: a user's name is 1 to 64 letters, digits, "
                             "or _ . @ -")
        if not (isinstance(token, str) and len(token) >= 16):
            raise ValueError(f"{name}: a bearer token is a string of 16 characters "
                             "or more")
        if not (isinstance(roles, list) and roles and set(roles) <= {ASKS, APPROVES}):
            raise ValueError(f'{name}: roles are a list of "{ASKS}", "{APPROVES}", '
                             "or both")
        read[name] = (token, frozenset(roles))
    if len({token for token, _ in read.values()}) < len(read):
        raise ValueError("two users share a bearer token: each needs a token of "
                         "their own")
    return read


class Users:
    """The users a host serves (see read_users), and the rules of who may do what."""

    def __init__(self, users: dict, approve_own: bool = False):
        """approve_own: one who asks and approves may approve their own requests too."""
        self.known, self.approve_own = read_users(users), approve_own

    def who(self, authorization: str) -> str:
        """Whose bearer token the Authorization header holds; 401 if nobody's."""
        if authorization.startswith("Bearer "):
            token = authorization.removeprefix("Bearer ").encode()
            for name, (known, _) in self.known.items():
                if hmac.compare_digest(token, known.encode()):  # its time says nothing
                    return name
        raise Refused(401, "send Authorization: Bearer <token>, with a token this "
                           "server knows", {"WWW-Authenticate": "Bearer"})

    def roles(self, user: str) -> frozenset:
        return self.known[user][1]

    def needs(self, user: str, role: str) -> None:
        """403 unless the user has the role."""
        if role not in self.roles(user):
            doing = "ask the agent" if role == ASKS \
                else "approve what the agent asks to do"
            raise Refused(403, f"{user} may not {doing}: the users file does not give "
                               f"{user} the role \"{role}\"")

    def may_approve(self, user: str, asker: str) -> bool:
        """May `user` give the verdict on a request `asker` made? An approver, not the
        asker (unless approve_own)."""
        return APPROVES in self.roles(user) and (user != asker or self.approve_own)

    def may_see(self, user: str, s: Session) -> bool:
        """May the user see this session: they asked in it, or they are its approver
        (it waits for their verdict, or holds one they gave)?"""
        if s.asker == user:
            return True
        if APPROVES not in self.roles(user):
            return False
        if pending(s) and self.may_approve(user, s.asker):
            return True
        return any(m.kind == "verdict" and m.name == user for m in s.context)
