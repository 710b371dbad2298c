--- same
ls | xargs LD_PRELOAD=./evil.so ls
ls | xargs $'LD_PRELOAD=./evil.so' ls
