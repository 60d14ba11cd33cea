#!/usr/bin/env bash
# Static checks of the CI definitions: actionlint on .github/workflows/ (it
# also runs shellcheck on every `run:` block), then shellcheck on the shell
# scripts CI runs. Both tools come with the dev extra.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo "actionlint $(actionlint -version | head -1), $(shellcheck --version | sed -n 's/^version: /shellcheck /p')"
actionlint -no-color -shellcheck="$(command -v shellcheck)"
shellcheck scripts/*.sh .ci/run
echo "lint_ci: workflows and scripts clean"
