#!/usr/bin/env bash
# `zoo serve` of a Higgs model: POST /v1/audio/speech over loopback on the tiny codec-encoder
# fixture, checked against `zoo tts --stream` (the same PCM16 bytes for a seed): pcm streamed as it
# is decoded, wav/flac/mp3/opus whole and valid, server-sent events that add up to the pcm bytes,
# 16 requests at once each equal to its run alone, a long input in pieces of sentences, a served voice (--voices) and the same voice sent
# as base64 audio equal to `zoo tts --ref-audio`, the 400s naming `param`, and (where the `openai`
# package is installed) the real client's audio.speech.create, streamed and not.
# Usage: serve_speech.sh SOURCE_DIR BUILD_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh" zoo-serve-speech "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib/serve_helpers.sh"
CFG=$SRC/configs/higgs-tiny-codec-enc.yaml
F=$FIX/higgs-tiny-codec-enc
mkdir -p "$TMP/voices"
cp "$F/voice.wav" "$TMP/voices/anna.wav"
echo "hi you" >"$TMP/voices/anna.txt"

# References from the CLI: seeds 0..15 zero-shot, seed 3 with the voice.
for seed in $(seq 0 15); do
  "$ZOO" tts "$CFG" --text "hello number $seed" --seed "$seed" --max-frames 30 --stream -q >"$TMP/ref$seed.pcm" ||
    fail "zoo tts --stream seed $seed"
done
"$ZOO" tts "$CFG" --text "hello there" --ref-audio "$F/voice.wav" --ref-text "hi you" --seed 3 --max-frames 30 \
  --stream -q >"$TMP/voice.pcm" || fail "zoo tts --ref-audio --stream"

start_server "$CFG" --served-model-name tts --voices "$TMP/voices" --max-running 8 --warmup 3 --codec-threads 2
grep -q "voice 'anna'" "$TMP/server.err" || fail "no voice line: $(cat "$TMP/server.err")"
grep -q "warm-up: 3 speech requests at once in" "$TMP/server.err" || fail "no warm-up line: $(cat "$TMP/server.err")"
((cases++))
python3 - "$BASE" "$TMP" "$F/voice.wav" <<'PY' || fail "speech checks (above)"
import base64, http.client, io, json, sys, threading, urllib.parse, wave
base, tmp, voice_wav = sys.argv[1], sys.argv[2], sys.argv[3]
host = urllib.parse.urlparse(base)
failures = []
def check(cond, what):
    if not cond:
        failures.append(what); print("FAIL:", what)
def post(body, path="/v1/audio/speech"):
    c = http.client.HTTPConnection(host.hostname, host.port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    return r.status, dict(r.getheaders()), data
def ref(seed):
    return open(f"{tmp}/ref{seed}.pcm", "rb").read()
def speech(seed, **kw):
    body = {"model": "tts", "input": f"hello number {seed}", "voice": "default", "seed": seed, "max_new_tokens": 30}
    body.update(kw)
    return post(body)

# pcm: the bytes `zoo tts --stream` writes.
status, headers, pcm = speech(1, response_format="pcm")
check(status == 200 and headers.get("Content-Type") == "audio/pcm", f"pcm status {status} {headers}")
check(len(pcm) > 0 and pcm == ref(1), f"pcm differs from zoo tts --stream ({len(pcm)} vs {len(ref(1))} bytes)")
check(headers.get("X-Sample-Rate") == "24000", f"sample rate header {headers}")
# wav: a valid file holding the same samples.
status, headers, data = speech(1, response_format="wav")
check(status == 200 and headers.get("Content-Type") == "audio/wav", f"wav status {status}")
with wave.open(io.BytesIO(data)) as w:
    check((w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000), "wav format")
    check(w.readframes(w.getnframes()) == ref(1), "wav samples differ from the pcm")
# The other formats: whole files, by their magic.
for fmt, ctype, ok in [("flac", "audio/flac", lambda d: d[:4] == b"fLaC"),
                       ("opus", "audio/ogg", lambda d: d[:4] == b"OggS" and b"OpusHead" in d[:64]),
                       ("mp3", "audio/mpeg", lambda d: d[:3] == b"ID3" or (d[0] == 0xFF and d[1] & 0xE0 == 0xE0))]:
    status, headers, data = speech(1, response_format=fmt)
    check(status == 200 and headers.get("Content-Type") == ctype and len(data) > 64 and ok(data), f"{fmt}: {status} {data[:16]}")
status, headers, data = speech(1)  # OpenAI's default format
check(status == 200 and headers.get("Content-Type") == "audio/mpeg", f"default format {headers}")
# Server-sent events: base64 pcm deltas, then done with usage.
status, headers, data = speech(1, response_format="pcm", stream_format="sse")
events = [json.loads(l[6:]) for l in data.decode().split("\n") if l.startswith("data: ")]
check(status == 200 and events and events[-1]["type"] == "speech.audio.done", f"sse events {events[-1:]}")
joined = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
check(joined == ref(1), "sse deltas differ from the pcm")
check(events[-1]["usage"]["output_tokens"] > 0 and events[-1]["usage"]["input_tokens"] > 0, f"usage {events[-1]}")
# 16 at once: each its own run alone.
results = {}
def one(seed):
    results[seed] = speech(seed, response_format="pcm")
threads = [threading.Thread(target=one, args=(s,)) for s in range(16)]
for t in threads: t.start()
for t in threads: t.join()
for seed in range(16):
    check(results[seed][0] == 200 and results[seed][2] == ref(seed), f"concurrent seed {seed}: {results[seed][0]}")
# A served voice and the same audio sent along: zoo tts --ref-audio's bytes.
voice_ref = open(f"{tmp}/voice.pcm", "rb").read()
body = {"model": "tts", "input": "hello there", "seed": 3, "max_new_tokens": 30, "response_format": "pcm"}
status, _, data = post(dict(body, voice="anna"))
check(status == 200 and data == voice_ref, f"voice anna: {status}, {len(data)} vs {len(voice_ref)} bytes")
audio = base64.b64encode(open(voice_wav, "rb").read()).decode()
status, _, data = post(dict(body, references=[{"audio": audio, "text": "hi you"}]))
check(status == 200 and data == voice_ref, f"references: {status} {data[:200]}")
status, _, data = post(dict(body, ref_audio="data:audio/wav;base64," + audio, ref_text="hi you"))
check(status == 200 and data == voice_ref, f"ref_audio data URL: {status} {data[:200]}")
# A long input in pieces of whole sentences (60 words at most), generated at once with seeds 5, 6:
# as long as the pieces spoken apart, and the same waveform until near the join.
first = " ".join(f"w{i}" for i in range(40)) + "."
second = " ".join(f"v{i}" for i in range(30)) + "."
base_body = {"model": "tts", "response_format": "pcm", "max_new_tokens": 60, "temperature": 0}
_, _, whole = post(dict(base_body, input=first + " " + second, seed=5))
_, _, one = post(dict(base_body, input=first, seed=5))
_, _, two = post(dict(base_body, input=second, seed=6))
check(len(whole) == len(one) + len(two) and len(one) > 0 and len(two) > 0, f"pieces: {len(whole)} vs {len(one)} + {len(two)}")
check(whole[: len(one) // 4] == one[: len(one) // 4], "the first piece's waveform")
# Errors: 400 naming param.
for bad, param in [({"voice": "nobody"}, "voice"), ({"speed": 2.0}, "speed"), ({"response_format": "aac"}, "response_format"),
                   ({"stream_format": "sse", "response_format": "mp3"}, "stream_format"), ({"input": ""}, "input"),
                   ({"references": [{"audio": "!!!"}]}, "references"), ({"ref_audio": base64.b64encode(b"not audio").decode()}, "ref_audio"),
                   ({"instructions": "whisper"}, "instructions"), ({"max_new_tokens": 0}, "max_new_tokens"),
                   ({"max_new_tokens": 100000}, "max_new_tokens"), ({"colour": 1}, "colour"), ({"temperature": "hot"}, "temperature")]:
    status, _, data = speech(1, **bad)
    err = json.loads(data).get("error", {}) if data[:1] == b"{" else {}
    check(status == 400 and err.get("param") == param, f"{bad}: {status} {data[:300]}")
status, _, data = speech(1, model="other")
check(status == 404, f"unknown model: {status}")
# Names as long as a body allows are cut in what the error echoes.
for big in ({"voice": "v" * 1000000}, {"model": "m" * 1000000}, {"response_format": "f" * 1000000}, {"k" * 1000000: 1}):
    status, _, data = speech(1, **big)
    check(status in (400, 404) and len(data) < 1000, f"a 1 MB name: {status}, {len(data)} bytes")
status, _, data = post({"model": "tts", "prompt": "x"}, "/v1/completions")
check(status == 400 and b"makes no text" in data, f"completions on a speech model: {status} {data[:200]}")
# Metrics count the speech requests.
c = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
c.request("GET", "/metrics"); m = c.getresponse().read().decode()
check("zoo_speech_requests_finished_total" in m and "zoo_speech_reference_cache_hits_total 1" in m, "speech metrics")
sys.exit(1 if failures else 0)
PY
# One log line per speech request, as completions have.
((cases++))
grep -q "^zoo serve: POST /v1/audio/speech 200 pcm pieces=1 frames=[0-9]* samples=[0-9]* [0-9.]*s$" "$TMP/server.err" ||
  fail "no speech log line: $(tail -3 "$TMP/server.err")"
if python3 -c "import openai" 2>/dev/null; then
  ((cases++))
  python3 - "$BASE" "$TMP" <<'PY' || fail "openai client speech checks (above)"
import io, sys, wave, openai
base, tmp = sys.argv[1], sys.argv[2]
ref = open(f"{tmp}/ref2.pcm", "rb").read()
client = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=60, max_retries=0)
extra = {"seed": 2, "max_new_tokens": 30}
failures = []
def check(cond, what):
    if not cond:
        failures.append(what); print("FAIL:", what)
r = client.audio.speech.create(model="tts", voice="default", input="hello number 2", response_format="wav", extra_body=extra)
with wave.open(io.BytesIO(r.content)) as w:
    check(w.readframes(w.getnframes()) == ref, "audio.speech.create wav")
with client.audio.speech.with_streaming_response.create(model="tts", voice="default", input="hello number 2",
                                                        response_format="pcm", extra_body=extra) as s:
    chunks = list(s.iter_bytes())
check(b"".join(chunks) == ref, f"streamed pcm ({len(chunks)} chunks)")
try:
    client.audio.speech.create(model="tts", voice="nobody", input="x")
    check(False, "unknown voice accepted")
except openai.BadRequestError as e:
    check(e.body["param"] == "voice", f"voice error {e.body}")
sys.exit(1 if failures else 0)
PY
else
  echo "note: the openai package is missing; its speech checks did not run"
fi
stop_server
[[ $SERVER_RC == 0 ]] || fail "server exit $SERVER_RC: $(tail -5 "$TMP/server.err")"
((failures == 0)) && echo "serve_speech: $cases cases passed"
exit $((failures > 0))
