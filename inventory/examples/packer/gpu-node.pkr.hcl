# A GPU node image baked with gpufleet.nvidia (docs/packer.md).
#
# The builder is an ordinary CPU instance: the bake installs the pinned
# driver, the Container Toolkit, containerd's NVIDIA runtime and crictl with
# no GPU and no NVIDIA kernel module loaded (gpufleet_bake=true). Everything
# that needs a GPU is left to systemd units the roles install, which run at
# the instance's first boot: nvidia-persistenced, gpufleet-mig (the tier's MIG
# layout), the CDI refresh unit and gpufleet-verify-boot, whose report is
# /var/lib/gpufleet/verify-boot.json.
#
#   ansible-galaxy collection install gpufleet.nvidia   # or a checkout on ANSIBLE_COLLECTIONS_PATH
#   packer init inventory/examples/packer
#   packer build -var tier=inference inventory/examples/packer
#
# The node's declaration is the inventory next to this file: Packer writes its
# generated inventory into this directory (inventory_directory), so
# group_vars/gpu_nodes.yml and group_vars/<tier>.yml apply to the builder as
# they would to a fleet host in that group.

packer {
  required_plugins {
    amazon = {
      version = ">= 1.3.0"
      source  = "github.com/hashicorp/amazon"
    }
    ansible = {
      version = ">= 1.1.1"
      source  = "github.com/hashicorp/ansible"
    }
  }
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

# The bake needs no GPU: build on a cheap CPU instance.
variable "build_instance_type" {
  type    = string
  default = "m6i.large"
}

# The inventory group the image is for (group_vars/<tier>.yml): its MIG
# layout is installed for the first boot.
variable "tier" {
  type    = string
  default = "inference"
}

# Where ansible-playbook finds the gpufleet.nvidia collection.
variable "collections_path" {
  type    = string
  default = "~/.ansible/collections"
}

source "amazon-ebs" "gpu_node" {
  region        = var.region
  instance_type = var.build_instance_type
  ssh_username  = "admin"
  ami_name      = "gpufleet-${var.tier}-${formatdate("YYYYMMDD-hhmm", timestamp())}"

  # Debian 13 (trixie), the official images. Its containerd (1.7) reads CDI
  # specs, which container_runtime_cdi turns on; Debian 12's (1.6) cannot.
  source_ami_filter {
    filters = {
      name                = "debian-13-amd64-*"
      architecture        = "x86_64"
      virtualization-type = "hvm"
    }
    owners      = ["136693071363"]
    most_recent = true
  }

  # DKMS builds the driver's module for the image's kernel: room for headers.
  launch_block_device_mappings {
    device_name           = "/dev/xvda"
    volume_size           = 30
    volume_type           = "gp3"
    delete_on_termination = true
  }

  tags = {
    "gpufleet:tier" = var.tier
  }
}

build {
  name    = "gpufleet-gpu-node"
  sources = ["source.amazon-ebs.gpu_node"]

  provisioner "ansible" {
    playbook_file       = "${path.root}/../../../playbooks/site.yml"
    groups              = ["gpu_nodes", var.tier]
    inventory_directory = path.root
    user                = "admin"
    use_proxy           = false
    extra_arguments = [
      "--extra-vars", "gpufleet_bake=true",
      "--extra-vars", "verify_report_dir=${path.root}/reports",
    ]
    ansible_env_vars = [
      "ANSIBLE_COLLECTIONS_PATH=${var.collections_path}",
      "ANSIBLE_HOST_KEY_CHECKING=False",
    ]
  }

  # Seal the image: every instance gets its own machine-id (and its own
  # boot_id in the first-boot report) from cloud-init.
  provisioner "shell" {
    inline = ["sudo cloud-init clean --logs", "sudo truncate --size=0 /etc/machine-id"]
  }
}
