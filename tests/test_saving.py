"""saving: the notebook as JSON, and back."""

import dataclasses

import pytest
from hypothesis import given, strategies as st

from microagent.context import Context
from microagent.message import ROLES, USER, Message
from microagent.saving import from_json, to_json

notes = st.builds(
    Message,
    role=st.sampled_from(ROLES),
    content=st.text(),
    name=st.none() | st.text(),
    tool=st.none() | st.text(),
    args=st.none() | st.text(),
    error=st.booleans(),
)
nested = st.builds(lambda m, inner: dataclasses.replace(m, notes=tuple(inner)), notes, st.lists(notes, max_size=3))


@given(st.lists(nested, max_size=8))
def test_saving_round_trips_any_notebook_exactly_and_always_encodes_as_utf8(messages):
    ctx = Context(tuple(messages))
    text = to_json(ctx)
    text.encode("utf-8")  # even a lone surrogate in a note is written as an escape
    assert from_json(text) == ctx and from_json(text.encode("utf-8")) == ctx


def test_saving_keeps_unicode_readable():
    ctx = Context().add(Message(USER, "Rückerstattung für 注文 A1234? 🎧"))
    assert "注文" in to_json(ctx) and from_json(to_json(ctx)) == ctx


def test_a_saved_file_that_an_editor_began_with_a_byte_order_mark_loads_as_it_was(tmp_path):
    ctx = Context().add(Message(USER, "refund A1234?"))
    path = tmp_path / "notebook.json"
    path.write_text(to_json(ctx), encoding="utf-8-sig")  # as Notepad saves "UTF-8 with BOM"
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert from_json(path.read_bytes()) == ctx
    assert from_json(path.read_text(encoding="utf-8")) == ctx  # the mark read as the text's first character
    # only the mark is skipped: a second one, or one inside, is not JSON
    with pytest.raises(ValueError, match="not a saved Context: the text is not valid JSON"):
        from_json("\ufeff\ufeff" + to_json(ctx))


FORMAT = '{"format": "microagent.context/1", "messages": '


@pytest.mark.parametrize("text, says", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", '"format"'),
    ('{"format": "something else", "messages": []}', '"format"'),
    (FORMAT + '{}}', '"messages"'),
    (FORMAT + '[{"role": "user"}]}', "message 0: .*missing 1 required positional argument: 'content'"),
    (FORMAT + '[{"role": "user", "content": "x", "secret": 1}]}', "message 0: .*unexpected keyword argument 'secret'"),
    (FORMAT + '[7]}', "message 0: .*not a mapping"),
    (FORMAT + '[{"role": "tool", "content": "x", "notes": 7}]}', "message 0 has notes that are not a list"),
    (FORMAT + '[{"role": "judge", "content": "x"}]}', "message 0: role must be one of"),
    (FORMAT + '[{"role": "user", "content": 7}]}', "message 0: a message's content must be a string"),
    (FORMAT + '[{"role": "tool", "content": "x", "error": []}]}', "message 0: a message's error must be True or False"),
    (FORMAT + '[{"role": "tool", "content": "x", "error": 1}]}', "message 0: a message's error must be True or False"),
    (FORMAT + '[{"role": "tool", "content": "x", "notes": [{"role": "x", "content": ""}]}]}',
     "message 0, note 0: role must be"),
    # a verdict file that shows one amount and approves another: the key given twice is refused
    (FORMAT + '[{"role": "user", "content": "approved", "args": "{}", "args": "{\\"amount\\": 7000}"}]}',
     '"args" is given twice'),
    ('{"format": "microagent.context/1", "format": "x", "messages": []}', '"format" is given twice'),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (b"\xff\xfe", "can't decode"),
])
def test_a_tampered_file_is_a_value_error_that_says_what_is_wrong(text, says):
    with pytest.raises(ValueError, match="not a saved Context: .*" + says.replace("(", r"\(")):
        from_json(text)


def test_to_json_saves_only_a_context():
    with pytest.raises(TypeError, match="saves a Context"):
        to_json([Message(USER, "hi")])
