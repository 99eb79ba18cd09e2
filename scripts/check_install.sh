#!/usr/bin/env bash
# The install check: bash scripts/check_install.sh
#
# Builds the wheel, installs it with the `embedded` extra into a fresh virtual environment,
# and runs structq from an empty folder outside the repository: the demo, `structq check`
# without -m (so the manifests bundled in the package must be found), a verified example
# question, the same with a relative date asked on a later --today (its dates must move), the
# bundled question set through `structq eval` with no model (verified items run, the rest are
# skipped), the demo piped through `cat` (no colour codes), and `structq --help`. Nothing is read from the source tree after the build, so a
# file missing from the wheel fails here. Exits non-zero on the first failure.
#
# PYTHON picks the interpreter (default python3); KEEP=1 keeps the temporary folder.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/structq-install.XXXXXX")"
QUESTION="华东区在职的研发部员工有哪些？"   # a verified example: answered with no model

say() { printf '==> %s\n' "$*"; }
fail() { printf '==> FAILED: %s\n' "$*" >&2; exit 1; }

cleanup() {
    # The demo's search engine runs in the background between commands: stop it with the check.
    [[ -x $WORK/venv/bin/structq ]] && structq search-server stop >/dev/null 2>&1 || true
    if [[ -n ${KEEP:-} ]]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# step NAME COMMAND...: run it, print its time, and stop the check when it fails.
step() {
    local name=$1 started=$SECONDS
    shift
    say "$name"
    "$@" || fail "$name"
    say "  ok ($((SECONDS - started)) s)"
}

# quietly NAME COMMAND...: the command's output goes to $WORK/NAME.log, shown only on failure.
quietly() {
    local log="$WORK/$1.log"
    shift
    "$@" >"$log" 2>&1 || { tail -30 "$log"; return 1; }
}

build_wheel() {
    quietly build "$PYTHON" -m pip wheel --no-deps -w "$WORK/dist" .
}

wheel() {
    local found=("$WORK"/dist/structq-*.whl)
    [[ -f ${found[0]} ]] || fail "no wheel in $WORK/dist"
    printf '%s\n' "${found[0]}"
}

check_wheel_contents() {
    "$PYTHON" - "$(wheel)" <<'EOF'
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
wanted = [f"structq/_bundled/capabilities/{name}.yaml" for name in ("hr", "sales", "reports")]
wanted += ["structq/demo/builder.py", "structq/cli/__init__.py"]
missing = [name for name in wanted if name not in names]
if missing:
    sys.exit(f"missing from the wheel: {', '.join(missing)}")
EOF
}

install_wheel() {
    "$PYTHON" -m venv "$WORK/venv"
    # The versions the test suite ran with (constraints.txt), as the documented install uses.
    quietly install "$WORK/venv/bin/python" -m pip install -c "$PWD/constraints.txt" "$(wheel)[embedded]"
}

# structq ARGS...: the installed command, run in an empty folder with a clean environment
# (no manifests setting, cache and audit log inside the temporary folder).
structq() {
    (
        cd "$WORK/outside"
        env -u STRUCTQ_MANIFESTS -u STRUCTQ_LLM -u OPENAI_API_KEY \
            STRUCTQ_DEMO_DIR="$WORK/demo" STRUCTQ_CACHE_DIR="$WORK/cache" STRUCTQ_STATE_DIR="$WORK/state" \
            "$WORK/venv/bin/structq" "$@"
    )
}

demo() {
    quietly demo structq demo --dir "$WORK/demo" --scale 0.1
    grep -q "Next" "$WORK/demo.log" || { tail -20 "$WORK/demo.log"; return 1; }
    printf '    %s\n' "$(grep -m1 -o "Answering the [0-9]* verified example questions" "$WORK/demo.log")"
}

check_bundled() {
    [[ ! -e $WORK/outside/capabilities ]] || fail "the folder outside the repository has a capabilities/"
    structq check | sed 's/^/    /'
}

ask_example() {
    structq ask "$QUESTION" --json | "$WORK/venv/bin/python" -c '
import json, sys
answer = json.load(sys.stdin)
assert answer["plan_source"] in ("verified", "template"), answer["plan_source"]
print("    %s: %d rows" % (answer["question"], answer["steps"][-1]["row_count"]))'
}

ask_relative_example() {
    # written for 2026-11-30 (去年 = 2025); asked on 2027-05-01, 去年第三季度 is 2026's.
    structq ask "去年第三季度在华东区销售额最高的产品是什么？" --today 2027-05-01 --json | "$WORK/venv/bin/python" -c '
import json, sys
answer = json.load(sys.stdin)
# a verified example moves the dates in its query; a slotted one binds them as parameters
ran = answer["steps"][0]["query"] + " " + json.dumps(answer["steps"][0]["params"])
assert answer["plan_source"] in ("verified", "template"), answer["plan_source"]
assert "2026-07-01" in ran and "2026-09-30" in ran and "2025-" not in ran, ran
print("    dates moved to 2026-07-01 … 2026-09-30 (%s)" % answer["plan_source"])'
}

eval_without_a_model() {
    # The question set's fixed rows expect scale-1.0 data; at --scale 0.1 only the items checked
    # by a query (expect_sql) must pass. What matters here: no model, and still a run.
    local bundled status=0
    bundled="$("$WORK/venv/bin/python" -c 'from structq.cli.common import bundled_manifests; print(bundled_manifests())')"
    structq eval "$bundled/eval.yaml" --json >"$WORK/eval.json" 2>"$WORK/eval.err" || status=$?
    [[ $status == 0 || $status == 1 ]] || { cat "$WORK/eval.err"; return 1; }
    "$WORK/venv/bin/python" - "$WORK/eval.json" "$bundled/eval.yaml" <<'EOF'
import json, sys
import yaml
report = json.load(open(sys.argv[1]))
by_question = {q["question"]: q for q in yaml.safe_load(open(sys.argv[2]))["questions"]}
ran = [item for item in report["items"] if not item["skipped"]]
assert ran and report["skipped"] == report["total"] - len(ran), report
assert all(item["reason"].startswith("needs a model") for item in report["items"] if item["skipped"])
bad = [item["question"] for item in ran if "expect_sql" in by_question[item["question"]] and not item["passed"]]
assert not bad, bad
print(f"    {len(ran)} verified items ran, {report['skipped']} skipped (no model)")
EOF
}

demo_piped() {
    structq demo --dir "$WORK/demo" --scale 0.1 2>&1 | cat >"$WORK/demo-piped.log"
    grep -q "Next" "$WORK/demo-piped.log" || { tail -20 "$WORK/demo-piped.log"; return 1; }
    if grep -q $'\x1b\[' "$WORK/demo-piped.log"; then
        echo "    colour codes in piped output:"; grep -m3 $'\x1b\[' "$WORK/demo-piped.log" | cat -v; return 1
    fi
}

show_help() {
    quietly help structq --help && grep -q "Usage: structq" "$WORK/help.log"
}

mkdir -p "$WORK/outside"
started=$SECONDS
say "working in $WORK"
step "building the wheel" build_wheel
say "  $(basename "$(wheel)")"
step "checking the wheel's contents" check_wheel_contents
step "installing it with [embedded] into a fresh venv" install_wheel
step "structq demo --scale 0.1, from outside the repository" demo
step "structq check (no -m: the bundled manifests)" check_bundled
step "structq ask (a verified example)" ask_example
step "structq ask --today 2027-05-01 (a relative-date example)" ask_relative_example
step "structq eval (the bundled question set, no model)" eval_without_a_model
step "structq demo | cat (no colour codes)" demo_piped
step "structq --help" show_help
say "install check passed in $((SECONDS - started)) s"
