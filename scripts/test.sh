#!/usr/bin/env bash
# The test command: bash scripts/test.sh [pytest arguments...]
#
# On a fresh Debian machine, as root, it installs what the suite needs (PostgreSQL and MariaDB
# server binaries; the tests start their own servers on free loopback ports; chromium, its
# driver and a CJK font for the web page's browser test; libmariadb-dev and a C compiler to
# build mysqlclient, the C MySQL driver), creates .venv, installs the package with its dev
# extras (and mysqlclient when it can be built) at the versions constraints.txt pins, lints
# with ruff, builds the documentation (mkdocs build --strict), and runs pytest with any
# arguments given.
# Without root, missing servers are not installed and their tests are skipped; without the
# build tools the MariaDB tests run on PyMySQL only.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.structq-install-stamp"

say() { printf '==> %s\n' "$*"; }
warn() { printf '==> warning: %s\n' "$*" >&2; }

have_postgres() { compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; }
have_mariadb() { PATH="$PATH:/usr/sbin" command -v mariadbd >/dev/null; }
have_browser() { command -v chromium >/dev/null && command -v chromedriver >/dev/null && fc-list 2>/dev/null | grep -qi "wenquanyi zen hei"; }
have_venv_module() { "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; }
have_mariadb_headers() { command -v pkg-config >/dev/null && { pkg-config --exists libmariadb || pkg-config --exists mysqlclient; }; }
have_compiler() { command -v cc >/dev/null || command -v gcc >/dev/null; }
have_python_headers() {
    "$PYTHON" -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null
}
# mysqlclient (the C MySQL/MariaDB driver structq prefers) builds from source: it needs these.
can_build_mysqlclient() { have_mariadb_headers && have_compiler && have_python_headers; }

install_system_packages() {
    local packages=()
    have_postgres || packages+=(postgresql)
    have_mariadb || packages+=(mariadb-server)
    have_browser || packages+=(chromium chromium-driver fonts-wqy-zenhei)
    have_mariadb_headers || packages+=(libmariadb-dev pkg-config)
    have_compiler || packages+=(gcc)
    [[ -d $VENV ]] || have_venv_module || packages+=(python3-venv)
    ((${#packages[@]})) || return 0

    if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
        warn "cannot install ${packages[*]} (needs root and apt-get); install them yourself"
        warn "until then the tests that need PostgreSQL, MariaDB or chromium are skipped"
        return 0
    fi
    say "installing system packages: ${packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
}

install_python_packages() {
    if [[ ! -x $VENV/bin/python ]]; then
        say "creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local extras=dev wanted
    if can_build_mysqlclient; then
        extras=dev,mysqlclient
    else
        warn "mysqlclient cannot be built here (needs libmariadb-dev, pkg-config, a C compiler and"
        warn "Python's headers): MySQL/MariaDB sources and their tests run on PyMySQL only"
    fi
    # Reinstall when the dependencies, their pinned versions or the extras change.
    wanted="$(sha256sum pyproject.toml constraints.txt | cut -d' ' -f1 | tr '\n' ' ')$extras"
    if [[ -f $STAMP && "$(cat "$STAMP")" == "$wanted" ]]; then
        say "python packages up to date"
        return 0
    fi
    say "installing structq and its extras ($extras) into $VENV"
    # This machine's pip configuration names local index folders that may not exist; pip says
    # so once per package ("… is ignored"), which is noise, not a problem.
    # constraints.txt pins every package to the version the suite runs with (scripts/lock.sh).
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$extras]" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    printf '%s\n' "$wanted" >"$STAMP"
}

check_code_and_docs() {
    say "ruff check"
    "$VENV/bin/ruff" check .
    say "mkdocs build --strict"
    # Into a temporary folder: the test command checks that the pages build, it publishes nothing.
    local site
    site="$(mktemp -d)"
    NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --site-dir "$site"
    rm -rf "$site"
}

run_tests() {
    if [[ -d ../shared/corpora ]]; then
        # The corpora are copied beside the repository: a corpus test that cannot read them
        # is a failure, not a skip.
        export STRUCTQ_REQUIRE_CORPORA="${STRUCTQ_REQUIRE_CORPORA:-1}"
    fi
    if have_browser; then
        export STRUCTQ_REQUIRE_BROWSER="${STRUCTQ_REQUIRE_BROWSER:-1}"
    fi
    if have_postgres && have_mariadb; then
        # The servers are installed: a fixture that cannot start one is a failure, not a skip.
        export STRUCTQ_REQUIRE_SERVERS="${STRUCTQ_REQUIRE_SERVERS:-1}"
    fi
    if can_build_mysqlclient; then
        # It was installed with the extras above: a test that cannot import it is a failure.
        export STRUCTQ_REQUIRE_MYSQLCLIENT="${STRUCTQ_REQUIRE_MYSQLCLIENT:-1}"
    fi
    say "running pytest${*:+ $*}"
    local status=0
    "$VENV/bin/python" -m pytest "$@" || status=$?
    if ((status == 5)); then
        printf '==> error: pytest collected no tests; a run without tests is not a pass\n' >&2
        return 1
    fi
    return "$status"
}

install_system_packages
install_python_packages
check_code_and_docs
run_tests "$@"
