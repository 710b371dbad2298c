--- same
find . -exec LD_PRELOAD=./evil.so rm {} +
find . -exec 'LD_PRELOAD=./evil.so' rm {} +
