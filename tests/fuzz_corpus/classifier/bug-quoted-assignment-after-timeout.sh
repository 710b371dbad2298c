--- same
timeout push LD_PRELOAD=/tmp/x.so
'timeout' 'push' 'LD_PRELOAD=/tmp/x.so'
