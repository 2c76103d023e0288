#!/bin/sh
# Install (or remove) tunelab's desktop launcher, icon and AppStream metadata for this user, in the
# XDG data folder ($XDG_DATA_HOME, else ~/.local/share). See packaging/README.md.
#
#   packaging/install-desktop.sh [--exec PATH] [--uninstall]
#
# --exec PATH   the tunelab program the launcher runs (default: `tunelab` found on PATH, written as an
#               absolute path, since a desktop session's PATH often lacks a virtual environment's bin)
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
apps=$data/applications
icons=$data/icons/hicolor
metainfo=$data/metainfo
exec_path=
uninstall=0

usage() { sed -n '2,9s/^# \{0,1\}//p' "$0"; }

while [ $# -gt 0 ]; do
    case $1 in
        --exec) [ $# -ge 2 ] || { echo "install-desktop.sh: --exec needs a path" >&2; exit 2; }
                exec_path=$2; shift 2 ;;
        --exec=*) exec_path=${1#--exec=}; shift ;;
        --uninstall) uninstall=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install-desktop.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done

refresh() {
    # Menus and icon themes notice new files sooner with these; neither is required.
    if command -v update-desktop-database >/dev/null 2>&1; then update-desktop-database -q "$apps" || true; fi
    if command -v gtk-update-icon-cache >/dev/null 2>&1; then gtk-update-icon-cache -q -t "$icons" || true; fi
}

if [ "$uninstall" = 1 ]; then
    rm -f "$apps/tunelab.desktop" "$icons/scalable/apps/tunelab.svg" \
          "$metainfo/io.github.tunelab.Tunelab.metainfo.xml"
    refresh
    echo "removed the tunelab launcher from $data"
    exit 0
fi

if [ -z "$exec_path" ]; then
    exec_path=$(command -v tunelab || true)
    if [ -z "$exec_path" ]; then
        echo "install-desktop.sh: warning: tunelab is not on PATH; the launcher runs plain 'tunelab'" >&2
        exec_path=tunelab
    fi
fi

# The desktop entry spec quotes a program path with spaces; the characters it would also need escaped
# (twice over) are refused instead. Then escape what sed's replacement treats specially (&, |).
case $exec_path in
    *[\"\`\$\\]*)
        echo "install-desktop.sh: refusing a program path with \", \`, \$ or \\ in it: $exec_path" >&2
        exit 2 ;;
    *[[:space:]]*) exec_value=\"$exec_path\" ;;
    *) exec_value=$exec_path ;;
esac
exec_sed=$(printf '%s' "$exec_value" | sed 's/[&|]/\\&/g')

mkdir -p "$apps" "$icons/scalable/apps" "$metainfo"
sed "s|^Exec=.*|Exec=$exec_sed|" "$here/tunelab.desktop" > "$apps/tunelab.desktop"
chmod 644 "$apps/tunelab.desktop"
cp "$here/icons/tunelab.svg" "$icons/scalable/apps/tunelab.svg"
cp "$here/io.github.tunelab.Tunelab.metainfo.xml" "$metainfo/io.github.tunelab.Tunelab.metainfo.xml"
chmod 644 "$icons/scalable/apps/tunelab.svg" "$metainfo/io.github.tunelab.Tunelab.metainfo.xml"
refresh
echo "installed the tunelab launcher in $data (Exec=$exec_value)"
