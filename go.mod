module github.com/shadowtune/shadowtune

go 1.26.8
