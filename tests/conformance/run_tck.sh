#!/usr/bin/env bash
# Run the public A2A TCK's mandatory, capabilities and quality categories against one system under test and keep
# each category's verbose log (one line per test). Not part of `make test`; see docs/a2a-conformance.md.
#
#   tests/conformance/run_tck.sh TCK_DIR TCK_PYTHON SUT_URL OUT_DIR [TOKEN]
#
# TCK_DIR is a writable copy of the TCK (it writes reports/), TCK_PYTHON the python of the TCK's own venv.
# TCK_CATEGORIES (default: mandatory capabilities quality) chooses the categories.
set -euo pipefail
tck_dir=$1 tck_python=$2 sut_url=$3 out_dir=$4 token=${5:-}
mkdir -p "$out_dir"
headers='{"A2A-Version":"1.0"}'
if [ -n "$token" ]; then headers="{\"A2A-Version\":\"1.0\",\"Authorization\":\"Bearer $token\"}"; fi
out_dir=$(cd "$out_dir" && pwd)
cd "$tck_dir"
for category in ${TCK_CATEGORIES:-mandatory capabilities quality}; do
  A2A_AUTH_HEADERS=$headers "$tck_python" run_tck.py --sut-url "$sut_url" --category "$category" --verbose \
    >"$out_dir/$category.log" 2>&1 || true
done
