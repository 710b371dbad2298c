--- same
env LD_PRELOAD=./evil.so ls
env 'LD_PRELOAD=./evil.so' ls
env "LD_PRELOAD=./evil.so" ls
env LD_PRELOAD\=./evil.so ls
