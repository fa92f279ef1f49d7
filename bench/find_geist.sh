# Sourced by the bench scripts: sets `geist` to $GEIST, else to the first built geist binary
# under the repository root ($1), else stops with a message naming the calling script ($2).
geist=${GEIST:-}
if [[ -z $geist ]]; then
  for cand in "$1"/build/bin/geist "$1"/build*/bin/geist "$1"/build/*/bin/geist; do
    if [[ -x $cand ]]; then geist=$cand; break; fi
  done
fi
[[ -n $geist && -x $geist ]] || { echo "$2: geist binary not found; set GEIST" >&2; exit 1; }
