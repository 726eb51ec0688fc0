#!/bin/sh
# Makes the peers' virtualenvs, never the project's environment (the test suite never needs them):
#   $LOOPWRIGHT_PEERS_VENV (default bench/.venv-peers): requirements.txt, the in-memory peers of
#     bench/run.py --peers and LangGraph's API server for bench/http_peers.py
#   $LOOPWRIGHT_ADK_VENV (default bench/.venv-peers-adk): requirements-adk.txt, Google ADK's API
#     server for bench/http_peers.py (its pins clash with the others')
#   sh bench/peers/install.sh          # both
#   sh bench/peers/install.sh peers    # or one: peers | adk
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/.." && pwd)
make() {  # venv requirements import-check
    "${PYTHON:-python3}" -m venv "$1"
    "$1/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/$2"
    "$1/bin/python" -c "$3"
    echo "installed $2 in $1"
}
what=${1:-all}
if [ "$what" = all ] || [ "$what" = peers ]; then
    make "${LOOPWRIGHT_PEERS_VENV:-$bench/.venv-peers}" requirements.txt \
        'import langgraph, smolagents, pydantic_ai, agents, langgraph_api'
fi
if [ "$what" = all ] || [ "$what" = adk ]; then
    make "${LOOPWRIGHT_ADK_VENV:-$bench/.venv-peers-adk}" requirements-adk.txt 'import google.adk'
fi
