"""Brains that need no model: a script, and a replay of a saved run.

`scripted(*moves)` plays a fixed list of Actions, one per turn, which is how the
tests drive an agent deterministically: no model, no network, the same run every
time. `replay(saved)` plays back the moves recorded in a saved notebook, so a run
made once with a language model can be made again offline, note for note.

The one rule: a script counts the moves already in the notebook instead of keeping a
counter of its own, so a run saved half way and loaded in another process goes on at
the right move. What it leaves out: a script does not read what happened; the n-th
move is the n-th Action whatever the tools said. A brain that reacts is a function
you write.
"""

from microagent.context import Context
from microagent.policy import Action

MOVES = ("decision", "no_move")  # the kinds of note a brain's move becomes


def actions(ctx: Context) -> list[Action]:
    """The brain's moves recorded in a notebook, in order: its decisions and no_moves.

    >>> from microagent.message import Message
    >>> ctx = Context((Message("user", "2 + 3?"),
    ...                Message("assistant", "adding", "me", "add", '{"a": 2, "b": 3}'),
    ...                Message("tool", "5", "add"),
    ...                Message("assistant", "no JSON in that", "me", error=True)))
    >>> for move in actions(ctx): print(move)
    Action(tool='add', args='{"a": 2, "b": 3}', reasoning='adding')
    Action(tool=None, args='{}', reasoning='no JSON in that')
    """
    if not isinstance(ctx, Context):
        raise TypeError(f"actions takes a Context, not {type(ctx).__name__}: "
                        "load saved text with microagent.saving.from_json(text)")
    # "" stays "": broken arguments replay as broken as they were
    return [Action(m.tool, "{}" if m.args is None else m.args, m.content)
            for m in ctx if m.kind in MOVES]


def scripted(*moves: Action):
    """A brain that plays `moves` in order: the n-th move of a run is moves[n].

    It counts the moves it is shown: under microagent.memory's `remembering`, it sees
    only a short view and loses its place.
    """
    if not all(isinstance(a, Action) for a in moves):
        raise TypeError("scripted takes Actions: "
                        "scripted(Action('look_up_order', {...}), ...)")

    def policy(ctx: Context, tools) -> Action:
        n = sum(m.kind in MOVES for m in ctx)  # moves made so far
        if n >= len(moves):
            raise IndexError(f"the script is over: the run asked for move {n + 1}, "
                             f"and the script holds {len(moves)}")
        return moves[n]
    return policy


def replay(saved: Context):
    """A brain that makes again the moves recorded in a saved notebook."""
    return scripted(*actions(saved))
