cat <<-EOF > ~/.bashrc
	export PATH=$(pwd):$PATH
	EOF
