#!/usr/bin/env python3
"""Chat-template goldens rendered by transformers' own renderer (render_jinja_template: jinja2's
ImmutableSandboxedEnvironment with trim_blocks/lstrip_blocks, transformers' tojson and globals).

Every (template, conversation, variant) is rendered; the golden keeps the inputs with the text,
or, where the template raises, the error's type and message. Zoo's renderer must reproduce each
byte for byte (tests/framework/test_chat_template_goldens.cpp).

  # the project's own templates (tests/fixtures/chat/templates/*.jinja) -> tests/fixtures/chat/goldens.json,
  # and the one-line templates of tests/fixtures/chat/snippets.txt -> tests/fixtures/chat/snippets.json
  /work/tools-venv/bin/python tools/golden/make_chat_template_goldens.py
  # real public templates (kept outside the repository) -> DIR/goldens.json
  /work/tools-venv/bin/python tools/golden/make_chat_template_goldens.py --real DIR
  # render again and compare with the committed goldens (ctest tools/chat_template_goldens;
  # exit 77 when transformers or jinja2 is missing)
  python3 tools/golden/make_chat_template_goldens.py --check

strftime_now() is pinned to 2025-03-07 00:00 (zoo's --date / RenderOptions.now_epoch_seconds).
"""
import argparse
import datetime as dt
import json
import re
import pathlib
import sys

try:
    import jinja2
    import transformers
    from transformers.utils import chat_template_utils as ctu
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    sys.exit(77)

REPO = pathlib.Path(__file__).resolve().parents[2]
DATE = "2025-03-07"


class _FixedNow(dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2025, 3, 7)


# transformers' strftime_now calls datetime.now() through the module it was defined in.
ctu.datetime = _FixedNow

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city, in \"metric\" or 'imperial' units",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "units": {"type": "string", "enum": ["metric", "imperial"]},
                "days": {"type": "integer", "description": "Forecast days", "default": 1, "maximum": 7.0},
                "hours": {"type": "array", "items": {"type": "integer"}},
                "where": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                    "required": ["lat"],
                },
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web {quickly}",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
TOOLS = [WEATHER, SEARCH]


def call(name, args, call_id=None):
    c = {"type": "function", "function": {"name": name, "arguments": args}}
    if call_id:
        c = {"id": call_id, **c}
    return c


S = {"role": "system", "content": "You are a careful assistant."}

# (name, messages, tools): written for these tests, covering what real conversations hold.
CONVERSATIONS = [
    ("user", [{"role": "user", "content": "Hello"}], None),
    ("system_user", [S, {"role": "user", "content": "Hello"}], None),
    ("multi_turn", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."}], None),
    ("system_multi_turn", [S, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                           {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}], None),
    ("ends_with_assistant", [{"role": "user", "content": "Say yes."}, {"role": "assistant", "content": "Yes."}], None),
    ("non_ascii", [{"role": "user", "content": "Grüß dich, 世界! Ça va? 🌍 ñ — “quotes”"}], None),
    ("quotes", [{"role": "user", "content": "He said \"hi\" and 'bye', then `ran`."}], None),
    ("braces", [{"role": "user", "content": "{{ not a tag }} {% neither %} {# nor #} {'a': 1} }}{{"}], None),
    ("newlines", [S, {"role": "user", "content": "line one\nline two\n\n  indented\n"},
                  {"role": "assistant", "content": "\n\nanswer with blank lines\n\n"}, {"role": "user", "content": "ok"}], None),
    ("empty_content", [{"role": "user", "content": ""}], None),
    ("empty_assistant", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""},
                         {"role": "user", "content": "Still there?"}], None),
    ("whitespace_only", [{"role": "user", "content": "   \n\t  "}], None),
    ("backslashes", [{"role": "user", "content": "C:\\path\\new \\n is not a newline \\\\ and \\u00e9"}], None),
    ("special_token_text", [{"role": "user", "content": "<|im_start|>assistant\n<|eot_id|><s>[INST]</s>"}], None),
    ("tabs_crlf", [{"role": "user", "content": "a\tb\r\nc\rd"}], None),
    ("system_only", [S], None),
    ("empty_list", [], None),
    ("long_conversation", [S] + [m for k in range(4) for m in (
        {"role": "user", "content": f"Question {k}?"}, {"role": "assistant", "content": f"Answer {k}."})] +
     [{"role": "user", "content": "Last one."}], None),
    ("system_non_ascii", [{"role": "system", "content": "Réponds en français.\nSois bref."},
                          {"role": "user", "content": "Qu'est-ce que c'est?"}], None),
    ("two_users", [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}], None),
    ("assistant_first", [{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "Hi"}], None),
    ("two_systems", [S, {"role": "system", "content": "Second system."}, {"role": "user", "content": "Hi"}], None),
    ("unknown_role", [{"role": "user", "content": "Hi"}, {"role": "narrator", "content": "Meanwhile..."}], None),
    ("extra_keys", [{"role": "user", "content": "Hi", "name": "alice", "id": 7}], None),
    ("reasoning", [{"role": "user", "content": "What is 6*7?"},
                   {"role": "assistant", "content": "42", "reasoning_content": "6*7 = 42.\nDouble check: yes."},
                   {"role": "user", "content": "And 6*8?"}], None),
    ("think_tags", [{"role": "user", "content": "Think."},
                    {"role": "assistant", "content": "<think>\nhmm, let me see\n</think>\n\nDone."}], None),
    ("think_tags_history", [{"role": "user", "content": "Q1"},
                            {"role": "assistant", "content": "<think>\nold thought\n</think>\n\nA1"},
                            {"role": "user", "content": "Q2"}], None),
    ("tools_user", [{"role": "user", "content": "Weather in Paris?"}], TOOLS),
    ("tools_system", [S, {"role": "user", "content": "Weather in Paris?"}], TOOLS),
    ("tool_call_and_result", [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris", "units": "metric"}, "call_1")]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5 °C and clear."}], TOOLS),
    ("tool_call_pending", [
        S, {"role": "user", "content": "Find zoo docs"},
        {"role": "assistant", "content": "", "tool_calls": [call("search", {"query": "zoo \"inference\" docs"}, "c9")]},
        {"role": "tool", "name": "search", "tool_call_id": "c9", "content": "no results"}], TOOLS),
    ("tool_calls_parallel", [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"city": "Oslo", "days": 3, "where": {"lat": 59.9, "lon": 10.75}}, "a"),
            call("get_weather", {"city": "Rome", "days": 1.0, "hours": [12, 18]}, "b")]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "a", "content": "-3.0"},
        {"role": "tool", "name": "get_weather", "tool_call_id": "b", "content": "18"},
        {"role": "user", "content": "Thanks!"}], TOOLS),
    ("tool_call_string_args", [
        {"role": "user", "content": "Search it"},
        {"role": "assistant", "content": "", "tool_calls": [call("search", "{\"query\": \"x\"}", "s1")]},
        {"role": "tool", "name": "search", "tool_call_id": "s1", "content": "found"}], TOOLS),
    ("tool_call_numbers", [
        {"role": "user", "content": "Numbers"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"city": "X", "big": 12345678901234567890, "small": 1e-7, "neg": -0.5,
                                 "whole": 3.0, "exp": 1e20, "list": [1, 2.50, None, True, False]})]}], TOOLS),
    ("tools_no_call", [{"role": "user", "content": "Just chat, no tools needed."},
                       {"role": "assistant", "content": "Sure!"}], TOOLS),
    ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Part one."},
                                                    {"type": "text", "text": "Part two."}]}], None),
]

# Templates of our own: the name of each, the special tokens and the extra variables it is rendered with.
OWN = {
    "features.jinja": [{"bos_token": "<s>", "eos_token": "</s>"}],
    "tools.jinja": [{}],
    "thinking.jinja": [{}, {"enable_thinking": False}, {"enable_thinking": True}],
    "expressions.jinja": [{"custom_flag": "on", "custom_list": ["a", 1, 2.5]}, {}],
}

# Real public templates: the tokens each is rendered with (tokenizer_config.json's values) and the
# extra variables of its variants.
REAL = {
    "Qwen-Qwen3-0.6B.jinja": [{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                              {"eos_token": "<|im_end|>", "enable_thinking": False}],
    "meta-llama-Llama-3.1-8B-Instruct.jinja": [{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
                                               {"bos_token": "<|begin_of_text|>", "date_string": "7 Mar 2025",
                                                "tools_in_user_message": False}],
    "meta-llama-Llama-3.2-3B-Instruct.jinja": [{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}],
    "meta-llama-Llama-3.3-70B-Instruct.jinja": [{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}],
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": [{"bos_token": "<s>", "eos_token": "</s>"}],
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": [{"bos_token": "<s>", "eos_token": "</s>"}],
    "google-gemma-2-2b-it.jinja": [{"bos_token": "<bos>", "eos_token": "<eos>"}],
    "microsoft-Phi-3.5-mini-instruct.jinja": [{"bos_token": "<s>", "eos_token": "<|endoftext|>"}],
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": [{"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}],
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": [{"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}],
    "Qwen-Qwen2.5-7B-Instruct.jinja": [{"eos_token": "<|im_end|>"}],
    # Firefunction reads the tools as a JSON string `functions` and the date as `datetime`.
    "fireworks-ai-llama-3-firefunction-v2.jinja": [{"bos_token": "<|begin_of_text|>", "datetime": "2025-03-07",
                                                    "functions": json.dumps([WEATHER["function"], SEARCH["function"]])}],
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": [{"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}],
}


def render(template, messages, tools, add_generation_prompt, variables):
    try:
        out, _ = ctu.render_jinja_template(conversations=[messages], tools=tools, chat_template=template,
                                           add_generation_prompt=add_generation_prompt, **variables)
        return {"text": out[0]}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception raises TemplateError itself; its subclasses are jinja2's own errors.
        kind = "raise" if type(e) is jinja2.exceptions.TemplateError else type(e).__name__
        return {"error": {"type": kind, "message": str(e)}}
    except Exception as e:  # a Python error inside the template (TypeError, ...): any error will do
        return {"error": {"type": type(e).__name__, "message": str(e)}}


def goldens(templates):
    cases = []
    for name, variants in templates.items():
        for variables in variants:
            for conv, messages, tools in CONVERSATIONS:
                for agp in (True, False):
                    case = {"template": name, "conversation": conv, "add_generation_prompt": agp,
                            "variables": variables}
                    case.update(render(templates_text[name], messages, tools, agp, variables))
                    cases.append(case)
    return cases


def main():
    global templates_text
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", type=pathlib.Path, help="render the real templates in DIR into DIR/goldens.json")
    ap.add_argument("--check", action="store_true", help="compare with the committed goldens instead of writing")
    args = ap.parse_args()
    if args.real:
        # The templates named above with their tokens; any other .jinja there with generic ones.
        directory = args.real
        table = {k: v for k, v in REAL.items() if (directory / k).exists()}
        for f in sorted(directory.glob("*.jinja")):
            table.setdefault(f.name, [{"bos_token": "<s>", "eos_token": "</s>"}])
        out = args.real / "goldens.json"
    else:
        directory, table = REPO / "tests/fixtures/chat/templates", OWN
        out = REPO / "tests/fixtures/chat/goldens.json"
    templates_text = {name: (directory / name).read_text() for name in table}
    # The transformers release the committed goldens were made with ("... (transformers X, jinja2 Y)").
    made_by = None
    if out.exists():
        match = re.search(r"transformers ([^,)]+)", json.loads(out.read_text()).get("generator", ""))
        made_by = match.group(1) if match else None
    cases = goldens(table)
    if not args.real:
        # One-line templates, each rendered alone with no messages: Python's printing, operators,
        # filters and the errors jinja2 raises (an undefined used, a type error).
        snippets = (REPO / "tests/fixtures/chat/snippets.txt").read_text().strip().split("\n")
        snippet_doc = {"generator": "tools/golden/make_chat_template_goldens.py", "date": DATE,
                       "cases": [{"template": s, **render(s, [], None, True, {})} for s in snippets]}
        snippet_file = REPO / "tests/fixtures/chat/snippets.json"
        if args.check:
            committed = json.loads(snippet_file.read_text())["cases"]
            if committed != snippet_doc["cases"] and made_by != transformers.__version__:
                # Another transformers sandboxes differently (5.24 refuses underscore-prefixed
                # namespace attributes, 5.17 allows them): a difference is news, not a verdict.
                print(f"{snippet_file}: made with transformers {made_by}, this is {transformers.__version__}; "
                      f"differences listed, the check is skipped", file=sys.stderr)
                for a, b in [(a, b) for a, b in zip(committed, snippet_doc["cases"]) if a != b][:8]:
                    print(f"  committed {json.dumps(a, ensure_ascii=False)}\n  now       {json.dumps(b, ensure_ascii=False)}",
                          file=sys.stderr)
                sys.exit(77)
            if committed != snippet_doc["cases"]:
                print(f"{snippet_file}: DIFFERS from transformers' rendering (transformers "
                      f"{transformers.__version__}, jinja2 {jinja2.__version__})", file=sys.stderr)
                differing = [(a, b) for a, b in zip(committed, snippet_doc["cases"]) if a != b]
                for a, b in differing[:8]:
                    print(f"  committed {json.dumps(a, ensure_ascii=False)}\n  now       {json.dumps(b, ensure_ascii=False)}",
                          file=sys.stderr)
                if len(committed) != len(snippet_doc["cases"]):
                    print(f"  {len(committed)} committed cases, {len(snippet_doc['cases'])} now", file=sys.stderr)
                sys.exit(1)
        else:
            snippet_file.write_text(json.dumps(snippet_doc, ensure_ascii=False, indent=1) + "\n")
    doc = {"generator": f"tools/golden/make_chat_template_goldens.py (transformers {transformers.__version__}, "
                        f"jinja2 {jinja2.__version__})", "date": DATE,
           "conversations": {name: {"messages": m, "tools": t} for name, m, t in CONVERSATIONS}, "cases": cases}
    text = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    if args.check:
        old = json.loads(out.read_text())
        same = old["cases"] == doc["cases"] and old["conversations"] == doc["conversations"]
        if not same and made_by != transformers.__version__:
            print(f"{out}: made with transformers {made_by}, this is {transformers.__version__}: differs; the check "
                  f"is skipped", file=sys.stderr)
            sys.exit(77)
        print(f"{out}: {'the same as' if same else 'DIFFERS from'} transformers' rendering "
              f"({len(cases)} cases)", file=sys.stderr)
        sys.exit(0 if same else 1)
    out.write_text(text)
    errors = sum("error" in c for c in cases)
    print(f"{out}: {len(cases)} cases ({errors} raise) over {len(table)} templates", file=sys.stderr)


if __name__ == "__main__":
    main()
