--- same
export LD_PRELOAD=/tmp/x.so
export 'LD_PRELOAD=/tmp/x.so'
declare -x "LD_PRELOAD=/tmp/x.so"
