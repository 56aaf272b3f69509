#!/bin/sh
# ensure_apt.sh BINARY PACKAGE WHY: install a Debian package when its binary is missing and
# we are root; one that stays missing is an error.
bin=$1 pkg=$2 why=$3
command -v "$bin" >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing $pkg ($why) with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
    command -v "$bin" >/dev/null 2>&1 && exit 0
fi
echo "error: '$bin' is missing ($why); install it (e.g. 'sudo apt-get install $pkg') and rerun" >&2
exit 1
