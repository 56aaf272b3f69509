#!/bin/sh
# graphviz's Python package needs the `dot` binary; install it with apt when we can.
command -v dot >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing graphviz (the 'dot' binary) with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null
    command -v dot >/dev/null 2>&1 && exit 0
fi
echo "error: graphviz's 'dot' binary is missing; install it (e.g. 'sudo apt-get install graphviz') and rerun" >&2
exit 1
