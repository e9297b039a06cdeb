# Where ps-lite's source is, for the scripts that build or test against ps-lite
# (scripts/test.sh, scripts/bench-vs-pslite.sh), found as tests/common/pslite.rs finds
# it. Sourced; run from the checkout's root.
#
#   pslite_source                    prints PSLITE_SRC, else shared/peers/ps-lite beside
#                                    the first ancestor directory of this checkout that
#                                    has one; fails (printing nothing) if there is none
#   pslite_has_programs DIR PROG...  true when DIR/tests/PROG.cc exists for every PROG:
#                                    a full checkout of ps-lite has its test programs'
#                                    sources, the copy beside CI's checkout has not

# ps-lite's test programs tests/pslite.rs runs (its ignored tests).
PSLITE_TEST_PROGRAMS="test_connection test_simple_app test_kv_app test_kv_app_multi_workers"

pslite_source() {
  if [ -n "${PSLITE_SRC:-}" ]; then
    echo "$PSLITE_SRC"
    return 0
  fi
  local d=$PWD
  while [ "$d" != / ]; do
    d=$(dirname "$d")
    if [ -f "$d/shared/peers/ps-lite/Makefile" ]; then
      echo "$d/shared/peers/ps-lite"
      return 0
    fi
  done
  return 1
}

pslite_has_programs() {
  local dir=$1 p
  shift
  for p in "$@"; do
    [ -f "$dir/tests/$p.cc" ] || return 1
  done
}
