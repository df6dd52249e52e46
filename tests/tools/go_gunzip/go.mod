module etcdbr/go_gunzip

go 1.19
