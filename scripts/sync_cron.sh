#!/usr/bin/env bash
# Nightly manifest drift check, for cron: bash /srv/structq/scripts/sync_cron.sh
#
# Cron runs with almost no environment and from $HOME, so this script sets everything itself:
# the folder of the manifests (relative SQLite paths resolve against it either way), the env
# file with the URLs' variables (HR_DB_URL=…, one per line), and the absolute path of the
# installed structq. It mails only when something needs a person, and says which case it is:
#   exit 1 → schema drift (the report), exit 3 → the manifests or the configuration are broken,
#   exit 4 → a source could not be reached; in every case stderr (the reason) is in the mail.
set -uo pipefail

STRUCTQ="${STRUCTQ:-/srv/structq/.venv/bin/structq}"   # absolute: cron's PATH is /usr/bin:/bin
MANIFESTS="${MANIFESTS:-/srv/structq/capabilities}"
ENV_FILE="${ENV_FILE:-/srv/structq/structq.env}"
MAIL_TO="${MAIL_TO:-data-team@example.com}"

if [[ -f $ENV_FILE ]]; then set -a; source "$ENV_FILE"; set +a; fi
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
"$STRUCTQ" sync --check --quiet -m "$MANIFESTS" >"$report" 2>&1
status=$?
case $status in
    0) exit 0 ;;
    1) subject="structq: schema drift" ;;
    3) subject="structq sync: ERROR in the manifests or configuration" ;;
    4) subject="structq sync: ERROR, a source is unavailable" ;;
    *) subject="structq sync: ERROR (exit $status)" ;;
esac
mail -s "$subject" "$MAIL_TO" <"$report"
exit "$status"
